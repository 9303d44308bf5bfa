"""The coordinators (COORDINATOR.md): producer ids now; transactions and groups next."""
