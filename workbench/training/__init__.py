"""Layer 5, training: the trainer that runs HET's systems through the emulated cluster
(``trainer``) and the RecD trainer on KJT / IKJT batches (``recd_trainer``). Imports ``models``
and lower."""
