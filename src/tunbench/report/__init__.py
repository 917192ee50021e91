"""Reports: summaries (pure) and one renderer per format. Renderers return text; cli.py writes files."""
