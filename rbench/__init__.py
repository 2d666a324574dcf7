"""rbench: distributed load generator and capacity-planning tool for RabbitMQ."""

__version__ = "0.1.0"
