"""Engine hooks: code that runs inside the inference server's own processes (standard library only).

The harness side needs two things from here: the environment that turns the step recorder on for one
server launch (``steplog_env``), and a plugin folder that makes the recorder loadable by an engine
whose Python does not have specbench installed (``plugin_site``: built once per version in the cache).
"""

from .site import STEPLOG_LEVELS, PluginSite, plugin_site, steplog_env

__all__ = ["STEPLOG_LEVELS", "PluginSite", "plugin_site", "steplog_env"]
