"""symkit.groups"""
