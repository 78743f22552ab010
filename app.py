"""`python app.py [--host H] [--port P]`: the web app, the same as `assistant serve`."""

import sys

from assistant.cli import main

if __name__ == "__main__":
    sys.exit(main(["serve", *sys.argv[1:]]))
