"""JMESPath over records stored as rows: plan.py (the expression as an engine-independent plan), render.py (the
plan as one SQL statement, SQLite JSON1 or PostgreSQL JSONB), codec.py (records as each engine stores them),
store.py (writing and reading rows). The entry point is tools_app.data_access.sql_query."""
