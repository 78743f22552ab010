"""A call: the person on the line, heard (`listener`) and answered in turns (`call`, carrying
out `turn_taking`, the table), each turn a task of the conversation's session."""
