"""What operators put on dashboards and pagers: Prometheus metrics (`metrics`) and OpenTelemetry
traces (`tracing`). A layer just above `core`, so every layer below the API can count what it does;
it never imports the layers above it, and nothing here holds memory text or a subject id."""
