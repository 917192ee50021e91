"""The shapes a trial takes: the client/server pair, N clients, a workload's own bring-ups (cold.py picks
one), and warm windows on tunnels a block keeps up."""
