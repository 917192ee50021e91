"""Everything tunbench creates on a machine, and the only code that creates or destroys it: the ledger,
processes, network namespaces, cgroups, temp dirs, crash cleanup and the run scope that owns them."""

# the programs every run uses, whatever its workloads: ip (namespaces, links, commands in a namespace) and
# ping (the readiness probe through a tunnel)
HOST_TOOLS = ("ip", "ping")
