"""The screens of the terminal app (one module each; the app imports them lazily)."""
