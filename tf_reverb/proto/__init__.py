"""Python modules of the wire protocol, generated from proto/ at build time."""
