from dtsim_tools.validate.cli import console_main

console_main()
