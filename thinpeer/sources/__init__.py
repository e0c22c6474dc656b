"""What a publisher reads: an XML document, XML items one per line, or JSON lines, from a file,
a file that is still being written (``--follow``) or stdin, as the bytes arrive."""
