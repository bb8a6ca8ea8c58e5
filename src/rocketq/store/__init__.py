"""store layer of rocketq (see ARCHITECTURE.md)."""
