-- An escalation step may reach whoever a schedule has on call when it fires (`teams.<t>.escalation[].on_call`):
-- the schedule's name is kept with the step, so who that is is asked when it is due, not when the incident fired.
ALTER TABLE escalations ADD COLUMN on_call TEXT;
