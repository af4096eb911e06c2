"""Off-policy replay under Ray (DQN, SAC; notebooks 02-03): roles, driver, options."""
