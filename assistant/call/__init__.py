"""A call: the person on the line, heard and answered in turns (`turn_taking`: the table)."""
