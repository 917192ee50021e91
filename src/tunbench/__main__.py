from tunbench.cli import main

main()
