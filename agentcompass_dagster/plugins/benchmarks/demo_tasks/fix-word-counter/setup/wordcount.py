"""Count the words in a text file.

Usage: python3 wordcount.py FILE

Prints the number of words in FILE. Words are separated by any amount of
whitespace (spaces, tabs, newlines).
"""

import sys


def count_words(text):
    return len(text.split(" "))


def main(argv):
    if len(argv) != 2:
        print("usage: python3 wordcount.py FILE", file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as f:
        print(count_words(f.read()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
