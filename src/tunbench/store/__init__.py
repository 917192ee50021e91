"""The result store: SQLite or PostgreSQL, one versioned schema. db.py is the store (Store); backend.py is
the only module that imports sqlite3 or psycopg, one connection wrapper per dialect."""
