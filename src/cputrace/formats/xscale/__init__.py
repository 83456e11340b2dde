"""Intel XScale trace buffers: input forms, message parsing, and the walk through the image."""
