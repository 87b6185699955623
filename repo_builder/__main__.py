from repo_builder.cli.main import run

run()
