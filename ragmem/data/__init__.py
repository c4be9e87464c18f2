"""Records in (layer data: imports text, runtime and the base modules).

File readers for JSON, JSONL, CSV and Parquet (readers), validated examples and datasets, held or
streamed (loaders), the segments of a conversation (segments), published datasets fetched and pinned
(published), and the sha256 of a file or folder (hashing).
"""
