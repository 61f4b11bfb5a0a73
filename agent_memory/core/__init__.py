"""The shared vocabulary of every layer: models, the workflow contract, tables, settings, errors."""
