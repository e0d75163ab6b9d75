from phaselens.cli import main

main()
