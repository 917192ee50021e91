"""Scenario files and flags -> validated, frozen models (all validation happens at load time)."""
