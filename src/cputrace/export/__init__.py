"""Writers of other tools' formats; `registry.EXPORTERS` lists them for `cputrace export`."""
