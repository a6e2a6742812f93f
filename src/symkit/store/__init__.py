"""symkit.store"""
