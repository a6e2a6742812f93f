"""symkit.nn"""
