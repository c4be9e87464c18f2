"""What a person reads (layer report: imports tracking and below).

The terminal tables (terminal), the self-contained report.html and the diff page (html, pages).
"""
