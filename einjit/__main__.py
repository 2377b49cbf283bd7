"""python -m einjit EXPRESSION SIZES... [--bench] [--isa ISA] [--disassemble]: see einjit.cli."""

from einjit.cli import main

if __name__ == "__main__":
    main()
