"""s3gym: watch, judge and steer LLM agents on the seven S3Gym games."""
