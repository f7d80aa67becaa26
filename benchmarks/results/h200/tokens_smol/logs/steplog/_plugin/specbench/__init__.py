"""specbench's engine hooks only (a plugin folder)."""
