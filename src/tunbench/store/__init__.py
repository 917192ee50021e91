"""The result store: SQLite with a versioned schema. db.py is the only module that imports sqlite3."""
