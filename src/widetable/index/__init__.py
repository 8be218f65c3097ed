"""Secondary indexes: local (synchronous, same batch as the row) and global (asynchronous,
applied from the change log). See ``manager`` for the lifecycle, ``schema`` for the key."""
