"""Rigs: the arm, its cameras and the cube, behind one interface (`base.Rig`)."""
