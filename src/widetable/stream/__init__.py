"""Change capture: the per-partition change log and the stream API over it.

``log`` owns the record format, ``feed`` appends records in the same engine
batch as the data they describe, ``api`` is Tablestore's Stream API.
"""
