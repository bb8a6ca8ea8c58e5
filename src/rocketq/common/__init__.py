"""common layer of rocketq (see ARCHITECTURE.md)."""
