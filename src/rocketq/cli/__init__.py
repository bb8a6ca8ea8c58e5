"""cli layer of rocketq (see ARCHITECTURE.md)."""
