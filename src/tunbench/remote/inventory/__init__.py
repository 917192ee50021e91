"""The hosts of a multi-host run: an Ansible-style inventory (INI or YAML), or a scenario's `[hosts]` table.

Two readers, one validator: ansible.py reads an inventory file and table.py a scenario's `[hosts]` table,
each into the same raw host (validate.RawHost: every value with the key and line it came from), and
validate.validate_host makes every Host, with one set of checks and one error style: a ConfigError naming the
file, the line and the key as that file spells it. model.py holds what they describe (Host, Inventory).
"""

from tunbench.remote.inventory.ansible import TUNBENCH_VARS, load_inventory
from tunbench.remote.inventory.model import DEFAULT_COMMAND, ROLES, Host, Inventory, pool_overlap
from tunbench.remote.inventory.table import HOST_TABLE_KEYS, inventory_from_table
from tunbench.remote.inventory.validate import SSH_CONNECTIONS, address_range

__all__ = [
    "DEFAULT_COMMAND",
    "HOST_TABLE_KEYS",
    "ROLES",
    "SSH_CONNECTIONS",
    "TUNBENCH_VARS",
    "Host",
    "Inventory",
    "address_range",
    "inventory_from_table",
    "load_inventory",
    "pool_overlap",
]
