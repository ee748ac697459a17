"""Store names of the original Knowtology library (``knowtology.adapters.*``) over our stores."""
