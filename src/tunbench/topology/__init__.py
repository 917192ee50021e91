"""Namespaces, links and addresses: this package owns (and tears down) every kernel object of a trial."""
