"""The web console at ``/ui``: static pages (plain ES modules, no build step) and their routes."""
