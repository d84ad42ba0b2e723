"""Auto-forwarding (S13): forwarding windows and the job that moves them."""
