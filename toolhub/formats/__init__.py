"""Date and time formats of the admin (FORMAT_MODULE_PATH): one way to write a time on every page."""
