"""The ``avspo`` console script: a renamed command still runs under its former name, with a note."""

from avspo_plugin.cli import MOVED, SUBCOMMANDS, main


def test_former_demo_runs_advantages_with_a_note(capsys):
    assert MOVED["demo"] in SUBCOMMANDS
    assert main(["advantages", "--prompts", "3", "--group-size", "4", "--steps", "1"]) == 0
    now = capsys.readouterr()
    assert main(["demo", "--prompts", "3", "--group-size", "4", "--steps", "1"]) == 0
    former = capsys.readouterr()
    assert former.out == now.out and "step 1: ACR" in now.out
    assert "`avspo demo` is now `avspo advantages`" in former.err and not now.err


def test_listing_names_the_commands_not_their_former_names(capsys):
    try:
        main(["--help"])
    except SystemExit:
        pass
    listing = capsys.readouterr().out
    assert "advantages" in listing and "demo " not in listing.replace("verl-demo", "")
