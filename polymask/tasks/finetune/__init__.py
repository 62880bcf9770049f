"""Fine-tuning an encoder on a task: options and recipes, the loop every task kind shares, table and span
tasks, the kind table, and Hugging Face folders as encoders."""
