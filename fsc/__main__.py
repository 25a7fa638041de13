from fsc.cli.main import run

run()
