"""The timers schema in a database: where its SQL lives, and installing or upgrading it."""
