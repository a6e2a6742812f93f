"""symkit.discover"""
