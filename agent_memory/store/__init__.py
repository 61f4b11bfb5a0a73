"""PostgreSQL and Redis: connections, tenant scope under row-level security, migrations, indexes."""
